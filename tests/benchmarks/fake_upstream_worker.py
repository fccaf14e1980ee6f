"""A fake upstream worker (run by `python -I`, standard library only): a counter per workspace."""

import json
import os
import subprocess
import sys
import time

workspaces = {}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "add to the counter",
            "parameters": {"type": "object", "properties": {"by": {"type": "integer"}}},
        },
    }
]


def state(workspace):
    return {"counter": {"value": workspaces[workspace]}}


def op_create(workspace, start=0):
    workspaces[workspace] = start
    return {"state": state(workspace)}


def op_call(workspace, name, arguments):
    if workspace not in workspaces:
        raise KeyError(workspace)
    if name == "add":
        workspaces[workspace] += arguments.get("by", 1)
        return {"result": str(workspaces[workspace]), "refused": False, "state": state(workspace)}
    if name == "hang":
        time.sleep(3600)
    if name == "crash":
        print("the fake backend dies", file=sys.stderr, flush=True)
        os._exit(3)
    workspaces[workspace] += 100  # as an upstream backend may: a failing call that changed something first
    return {"result": "Error: no such function " + name, "refused": True, "state": state(workspace)}


def op_delete(workspace):
    return workspaces.pop(workspace, None) is not None


def op_env():
    return sorted(os.environ)


def op_spawn():
    return subprocess.Popen(["sleep", "600"]).pid


def op_chatty():
    print("upstream noise on stdout")
    return "answered"


def op_write(path):
    with open(path, "w") as handle:
        handle.write("written")
    return os.getcwd()


def op_tasks(count):
    return [{"id": f"counter_{i}", "start": i} for i in range(count)]


OPS = {name[3:]: fn for name, fn in dict(globals()).items() if name.startswith("op_")}

protocol, sys.stdout = sys.stdout, sys.stderr
for line in sys.stdin:
    request = json.loads(line)
    request_id, op = request.pop("id"), request.pop("op")
    try:
        reply = {"id": request_id, "ok": True, "result": OPS[op](**request)}
    except Exception as exc:
        reply = {"id": request_id, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    protocol.write(json.dumps(reply) + "\n")
    protocol.flush()
