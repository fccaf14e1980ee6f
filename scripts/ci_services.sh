#!/usr/bin/env bash
# Start (when down and local) and await the services the `services`-marked tests use, then exit 0; otherwise
# exit 1 naming every service that is still unreachable. Usage:
#   scripts/ci_services.sh [postgres] [redis] [rabbitmq]     (default: all three)
# Hosts and ports follow the variables the tests read: DAGSTER_PG_HOST/DAGSTER_PG_PORT,
# EVAL_PIPELINES_TEST_REDIS_HOST/_PORT, EVAL_PIPELINES_TEST_RABBITMQ_HOST/_PORT.
# CI_SERVICES_START=0 only waits; CI_SERVICES_WAIT_SECONDS (default 60) bounds the wait per service.
set -uo pipefail

WAIT_SECONDS="${CI_SERVICES_WAIT_SECONDS:-60}"
START="${CI_SERVICES_START:-1}"

PG_HOST="${DAGSTER_PG_HOST:-127.0.0.1}"
PG_PORT="${DAGSTER_PG_PORT:-5432}"
REDIS_HOST="${EVAL_PIPELINES_TEST_REDIS_HOST:-127.0.0.1}"
REDIS_PORT="${EVAL_PIPELINES_TEST_REDIS_PORT:-6379}"
RABBITMQ_HOST="${EVAL_PIPELINES_TEST_RABBITMQ_HOST:-127.0.0.1}"
RABBITMQ_PORT="${EVAL_PIPELINES_TEST_RABBITMQ_PORT:-5672}"

log() { echo "ci_services: $*" >&2; }

port_open() { timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

is_local() { [[ "$1" == "127.0.0.1" || "$1" == "localhost" || "$1" == "::1" ]]; }

postgres_ready() {
    if command -v pg_isready >/dev/null; then
        pg_isready -q -h "$PG_HOST" -p "$PG_PORT" -t 2
    else
        port_open "$PG_HOST" "$PG_PORT"
    fi
}

redis_ready() {
    if command -v redis-cli >/dev/null; then
        [[ "$(timeout 3 redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" == "PONG" ]]
    else
        port_open "$REDIS_HOST" "$REDIS_PORT"
    fi
}

rabbitmq_ready() { port_open "$RABBITMQ_HOST" "$RABBITMQ_PORT"; }

# The machine's own start commands (see the machine notes); they only apply to a server on this machine.
start_postgres() { pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start; }
start_redis() {
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" --appendonly no \
        --dir /var/lib/redis --logfile /var/log/redis/ci.log
}
start_rabbitmq() { rabbitmq-server -detached; }

# ensure NAME LABEL HOST PORT: await the service, starting it once if it is down, local and START=1.
ensure() {
    local name="$1" label="$2" host="$3" port="$4"
    if "${name}_ready"; then
        log "$label is up on $host:$port"
        return 0
    fi
    if [[ "$START" == "1" ]] && is_local "$host"; then
        log "$label is down on $host:$port; starting it"
        "start_${name}" >&2 || log "starting $label failed (exit $?)"
    fi
    local deadline=$((SECONDS + WAIT_SECONDS))
    while ((SECONDS < deadline)); do
        if "${name}_ready"; then
            log "$label is up on $host:$port"
            return 0
        fi
        sleep 1
    done
    log "ERROR: $label is not reachable on $host:$port after ${WAIT_SECONDS}s"
    return 1
}

services=("$@")
((${#services[@]})) || services=(postgres redis rabbitmq)
missing=()
for service in "${services[@]}"; do
    case "$service" in
        postgres) ensure postgres PostgreSQL "$PG_HOST" "$PG_PORT" || missing+=(PostgreSQL) ;;
        redis) ensure redis Redis "$REDIS_HOST" "$REDIS_PORT" || missing+=(Redis) ;;
        rabbitmq) ensure rabbitmq RabbitMQ "$RABBITMQ_HOST" "$RABBITMQ_PORT" || missing+=(RabbitMQ) ;;
        *)
            log "ERROR: unknown service '$service' (known: postgres redis rabbitmq)"
            exit 2
            ;;
    esac
done
if ((${#missing[@]})); then
    log "ERROR: missing service(s): ${missing[*]}"
    exit 1
fi
