# One image for every elastic-sps container: the services, the dataplane's driver AND the
# Spark master and workers. So the driver and the executors share one Python (3.11), one
# set of dependencies and one Spark (the pip pyspark's jars: the cluster's Spark is the
# driver's pyspark by construction). Compose picks the program with `command`.
FROM python:3.11-slim

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps tini \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
RUN pip install --no-cache-dir . \
    && ln -s "$(python -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')" /opt/spark

# A non-root user owning only what it writes: checkpoints, Spark's scratch and work dirs.
RUN useradd --create-home --uid 10001 sps \
    && mkdir -p /var/lib/sps/checkpoints /var/lib/sps/spark-work /var/lib/sps/spark-local \
    && chown -R sps:sps /var/lib/sps
USER sps

ENV PYTHONUNBUFFERED=1 \
    SPARK_HOME=/opt/spark \
    PYSPARK_PYTHON=/usr/local/bin/python \
    PYSPARK_DRIVER_PYTHON=/usr/local/bin/python \
    SPARK_WORKER_DIR=/var/lib/sps/spark-work \
    SPARK_LOCAL_DIRS=/var/lib/sps/spark-local \
    SPS_CHECKPOINT_DIR=/var/lib/sps/checkpoints \
    SPS_WEB_HOST=0.0.0.0 \
    SPS_WEB_PORT=8000

# tini reaps Spark's and the services' children and forwards SIGTERM (a clean stop).
ENTRYPOINT ["tini", "--", "python", "-m"]
