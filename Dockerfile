# One image for every elastic-sps container: the services, the dataplane's driver AND the
# Spark master and workers. So the driver and the executors share one Python (Debian
# bookworm's 3.11), one set of dependencies and one Spark (the pip pyspark's jars: the
# cluster's Spark is the driver's pyspark by construction). Compose picks the program
# with `command`.
#
# BASE: any Debian bookworm image; `compose/stack.sh build` passes debian:bookworm-slim
# when a registry answers and a debootstrapped local/debian:bookworm when none does.
ARG BASE=debian:bookworm-slim
FROM ${BASE}

# Extra CA certificates of the build host (compose/ca/*.crt, copied there by
# compose/stack.sh): an egress that re-signs TLS makes pip fail without them.
COPY compose/ca/ /usr/local/share/ca-certificates/extra/
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates python3 python3-venv \
       openjdk-17-jre-headless procps tini \
    && update-ca-certificates \
    && rm -rf /var/lib/apt/lists/*
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    PATH=/opt/venv/bin:$PATH

WORKDIR /app
# The dependencies first, from pyproject.toml alone: a change to the code (or the README)
# then rebuilds the last layers only, in seconds (pyspark builds from its sdist: ~90 s).
COPY pyproject.toml constraints.txt ./
RUN python3 -m venv /opt/venv \
    && python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt -c constraints.txt \
    && ln -s "$(python -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')" /opt/spark
COPY README.md ./
COPY shared ./shared
COPY services ./services
# the example user projects: the built-in twitter, log and advertising topologies name
# their functions
COPY examples/twitter ./examples/twitter
COPY examples/sentiment ./examples/sentiment
COPY examples/log ./examples/log
COPY examples/advertising ./examples/advertising
RUN pip install --no-cache-dir --no-deps . ./examples/twitter ./examples/sentiment \
    ./examples/log ./examples/advertising

# A non-root user owning what it writes: the working directory (faust keeps its data
# directory there: owned by root, monitor, analyze, plan and execute crash-looped with
# PermissionError), checkpoints, Spark's scratch and work dirs.
RUN useradd --create-home --uid 10001 sps \
    && mkdir -p /var/lib/sps/checkpoints /var/lib/sps/spark-work /var/lib/sps/spark-local \
       /var/lib/sps/state \
    && chown -R sps:sps /var/lib/sps /app
USER sps

ENV PYTHONUNBUFFERED=1 \
    SPARK_HOME=/opt/spark \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python \
    SPARK_WORKER_DIR=/var/lib/sps/spark-work \
    SPARK_LOCAL_DIRS=/var/lib/sps/spark-local \
    SPS_CHECKPOINT_DIR=/var/lib/sps/checkpoints \
    SPS_WEB_HOST=0.0.0.0 \
    SPS_WEB_PORT=8000

# tini reaps Spark's and the services' children and forwards SIGTERM (a clean stop).
ENTRYPOINT ["tini", "--", "python", "-m"]
