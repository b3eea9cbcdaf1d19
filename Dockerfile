# vmware-pilot: one replica, serving MCP over HTTPS on 8443 as the unprivileged user `pilot`.
#   docker build -t vmware-pilot .
#   docker build -t vmware-pilot --build-arg COMPANIONS="vmware-monitor vmware-aiops" .   # with skills
# See compose.yaml (PostgreSQL and two replicas) and docs/operations.md (Deploy).

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VMWARE_PILOT_HOME=/var/lib/vmware-pilot
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels \
    && useradd --system --uid 10001 --create-home --home-dir /home/pilot --shell /usr/sbin/nologin pilot \
    && install -d -o pilot -g pilot -m 0700 /var/lib/vmware-pilot
# Optional layer: the companion skills this replica dispatches to (their own packages from PyPI).
ARG COMPANIONS=""
RUN if [ -n "$COMPANIONS" ]; then pip install --no-cache-dir $COMPANIONS; fi
COPY deploy/make-cert.py /usr/local/bin/vmware-pilot-make-cert
USER pilot
WORKDIR /home/pilot
VOLUME ["/var/lib/vmware-pilot"]
EXPOSE 8443
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import ssl, urllib.request; urllib.request.urlopen('https://127.0.0.1:8443/livez', timeout=4, context=ssl._create_unverified_context())"]
CMD ["vmware-pilot", "mcp", "--transport", "https", "--host", "0.0.0.0", "--port", "8443", \
     "--cert", "/etc/vmware-pilot/tls/cert.pem", "--key", "/etc/vmware-pilot/tls/key.pem", \
     "--public-name", "localhost,127.0.0.1"]
