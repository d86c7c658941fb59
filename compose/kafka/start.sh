#!/bin/sh
# Start a single-node KRaft broker: server.properties from the KAFKA_* variables below,
# the storage formatted on the first start only (the data volume keeps it after that).
set -euf  # -f: no globbing, the classpath keeps its literal libs/*
DATA=/var/lib/kafka/data
CONF=/tmp/server.properties
cat > "$CONF" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@${KAFKA_CONTROLLER_HOST:-kafka}:9093
listeners=${KAFKA_LISTENERS:-INTERNAL://:9092,HOST://:9094,CONTROLLER://:9093}
advertised.listeners=${KAFKA_ADVERTISED_LISTENERS:-INTERNAL://kafka:9092,HOST://localhost:9094}
listener.security.protocol.map=INTERNAL:PLAINTEXT,HOST:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=INTERNAL
controller.listener.names=CONTROLLER
log.dirs=$DATA
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=5
share.coordinator.state.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
# WARN and above, plus the broker's start line in /tmp/started.log
cat > /tmp/log4j2.properties <<LOG
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
appender.file.type = File
appender.file.name = file
appender.file.fileName = /tmp/started.log
appender.file.append = false
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %m%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = info
logger.started.appenderRef.file.ref = file
LOG
JAVA="java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m} -XX:+UseG1GC -Dlog4j2.configurationFile=/tmp/log4j2.properties -cp /opt/kafka/libs/*"
if [ ! -f "$DATA/meta.properties" ]; then
  $JAVA kafka.tools.StorageTool format -t "${KAFKA_CLUSTER_ID:-c2Fw5SpsQ1NUcmVhbUNsdXN0}" -c "$CONF"
fi
exec $JAVA kafka.Kafka "$CONF"
