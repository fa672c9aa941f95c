# diag as a web service: the Streamlit app on port 8501, the database on the /data volume.
#   docker build -t diag .
#   docker run -p 127.0.0.1:8501:8501 -v diag-data:/data diag
# The app has no login unless .streamlit/secrets.toml has [auth] (mount it; never bake it in): publish it on the
# host's loopback as above, and for a team put a proxy with a password in front (deploy/README.md,
# deploy/compose.yaml). Inside the container it binds 0.0.0.0, else Docker could not forward to it.
# Installs what the README installs (requirements.txt, then the package itself, editable, from /app) and
# nothing else. tests/test_dockerfile.py keeps this file in step with requirements.txt and `diag app`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DIAG_DB=/data/diag.duckdb \
    DIAG_UPLOAD_DIR=/data/uploads

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin diag \
    && mkdir -p /data \
    && chown diag:diag /data

WORKDIR /app
COPY requirements.txt ./
RUN pip install -r requirements.txt

COPY pyproject.toml README.md ./
COPY diag ./diag
COPY parsers ./parsers
COPY app ./app
COPY sample_traces ./sample_traces
COPY .streamlit ./.streamlit
RUN pip install --no-deps -e .

USER diag
VOLUME ["/data"]
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request, sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).status != 200)"]
CMD ["diag", "app", "--address", "0.0.0.0", "--port", "8501"]
