"""The BFCL v4 multi-turn side of the project, run by the bfcl venv's interpreter as a file (`python -I
upstream_worker.py`): JSON lines on stdin (`{"id", "op", ...}`), one answer per line on stdout (`{"id", "ok",
"result" | "error"}`).

It imports only the standard library and `bfcl_eval` (with the few packages `bfcl_eval.model_handler.utils`
needs), never `eval_pipelines`. Ops:

- `tasks {category}`: every entry of the category with its turns, classes, initial config, the tools as the
  OpenAI FC handler presents them (the held-out ones per turn apart), and the gold per turn (call strings,
  their execution results and the instances' public state after the turn, run on fresh instances);
- `create {workspace, initial_config, involved_classes, test_entry_id, long_context}` -> state;
- `call {workspace, name, arguments}` -> `{result, state}`: ONE call, validated before upstream builds and
  `eval`s its call string;
- `state {workspace}`, `delete {workspace}`;
- `grade {test_entry_id, model_result}`: upstream's verdict, on its own entry and ground truth, on per-turn,
  per-step model responses (`{name: arguments_json}` dicts as the FC handler records them).
"""

from __future__ import annotations

import ast
import builtins
import copy
import datetime
import functools
import inspect
import itertools
import json
import keyword
import os
import re
import sys
from typing import Any

# bfcl_eval makes its result, score and lock folders at import, beside the installed package unless told
# otherwise: the worker's own working folder is the one place it may write.
os.environ.setdefault("BFCL_PROJECT_ROOT", os.getcwd())

from bfcl_eval.constants.category_mapping import VERSION_PREFIX
from bfcl_eval.constants.default_prompts import (
    DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC,
    MAXIMUM_STEP_LIMIT,
)
from bfcl_eval.constants.enums import ModelStyle
from bfcl_eval.constants.eval_config import (
    MULTI_TURN_FUNC_DOC_PATH,
    POSSIBLE_ANSWER_PATH,
    PROMPT_PATH,
)
from bfcl_eval.constants.executable_backend_config import (
    MULTI_TURN_FUNC_DOC_FILE_MAPPING,
)
from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (
    multi_turn_checker,
)
from bfcl_eval.model_handler.utils import (
    convert_to_function_call,
    convert_to_tool,
)

CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
_ERROR_PREFIX = "Error during execution: "

_names = itertools.count(1)
#: workspace id -> what upstream needs to find its instances again (model_name is unique per workspace).
_workspaces: dict[str, dict[str, Any]] = {}


class RefusedCall(ValueError):
    """A call whose name or argument names would be code in the string upstream `eval`s."""


def _fresh_model_name(kind: str) -> str:
    # upstream caches instances in module globals under `<model_name>_<entry>_<class>_instance`: a name never
    # used before keeps every workspace and every grading apart.
    return f"eval_pipelines_{kind}{next(_names)}"


def _long_context(category: str) -> bool:
    # the same test upstream's inference and checker apply to the category
    return "long_context" in category or "composite" in category


def _read_json_lines(path: Any) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _drop_globals(model_name: str) -> None:
    prefix = re.sub(r"[-./:]", "_", model_name) + "_"
    module_globals = vars(multi_turn_utils)
    for key in [key for key in module_globals if key.startswith(prefix) and key.endswith("_instance")]:
        del module_globals[key]


# ---- state dump ----


def _dump(value: Any, ancestors: tuple[int, ...]) -> Any:
    """`value` as JSON, so that two dumps are equal exactly when upstream's `!=` finds the values equal: objects
    by their public attributes (a back-reference to an enclosing object, such as a directory's parent, is left
    out: the classes' own `__eq__` ignores it), sets sorted, dates as ISO text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {_dump_key(key): _dump(item, ancestors) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_dump(item, ancestors) for item in value]
    if isinstance(value, (set, frozenset)):
        items = [_dump(item, ancestors) for item in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if hasattr(value, "__dict__"):
        inner = (*ancestors, id(value))
        return {
            name: _dump(item, inner)
            for name, item in vars(value).items()
            if not name.startswith("_") and id(item) not in inner
        }
    return repr(value)


def _dump_key(key: Any) -> str:
    return key if isinstance(key, str) else json.dumps(key) if isinstance(key, (int, float, bool)) else repr(key)


def dump_instances(instances: dict[str, Any]) -> dict[str, Any]:
    return {class_name: _dump(instance, ()) for class_name, instance in sorted(instances.items())}


# ---- tasks ----


def _tools(func_docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(convert_to_tool(func_docs, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS))


def _func_docs(involved_classes: list[str]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for class_name in involved_classes:
        docs.extend(_read_json_lines(MULTI_TURN_FUNC_DOC_PATH / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]))
    return docs


def _execute(calls: list[str], workspace: dict[str, Any], *, eval_run: bool = False) -> tuple[list[str], dict]:
    results, instances = multi_turn_utils.execute_multi_turn_func_call(
        func_call_list=calls,
        initial_config=workspace["initial_config"],
        involved_classes=workspace["involved_classes"],
        model_name=workspace["model_name"],
        test_entry_id=workspace["test_entry_id"],
        long_context=workspace["long_context"],
        is_evaL_run=eval_run,
    )
    return list(results), instances


def _gold(entry: dict[str, Any], ground_truth: list[list[str]], category: str) -> list[dict[str, Any]]:
    workspace = {
        "model_name": _fresh_model_name("gold"),
        "initial_config": entry.get("initial_config", {}),
        "involved_classes": entry["involved_classes"],
        "test_entry_id": entry["id"],
        "long_context": _long_context(category),
    }
    turns = []
    try:
        for calls in ground_truth:
            results, instances = _execute(calls, workspace)
            turns.append(
                {
                    "calls": calls,
                    "reference": [_parsed_call(call, instances) for call in calls],
                    "results": results,
                    "state": dump_instances(instances),
                }
            )
    finally:
        _drop_globals(workspace["model_name"])
    return turns


def _parsed_call(call: str, instances: dict[str, Any]) -> dict[str, Any]:
    """A gold call string as a tool name and keyword arguments: positional arguments are named by binding them
    to the method's own signature."""
    node = ast.parse(call, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"gold call {call!r} is not a plain function call")
    name = node.func.id
    method = next(getattr(instance, name) for instance in instances.values() if hasattr(instance, name))
    positional = [ast.literal_eval(argument) for argument in node.args]
    named = {item.arg: ast.literal_eval(item.value) for item in node.keywords if item.arg}
    bound = inspect.signature(method).bind_partial(*positional, **named)
    return {"name": name, "arguments": dict(bound.arguments)}


def op_tasks(category: str) -> dict[str, Any]:
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL multi-turn category {category!r}; known: {', '.join(CATEGORIES)}")
    entries = _read_json_lines(PROMPT_PATH / f"{VERSION_PREFIX}_{category}.json")
    answers = {
        row["id"]: row["ground_truth"]
        for row in _read_json_lines(POSSIBLE_ANSWER_PATH / f"{VERSION_PREFIX}_{category}.json")
    }
    tasks = []
    for entry in entries:
        docs = _func_docs(entry["involved_classes"])
        held_out: dict[str, list[dict[str, Any]]] = {}
        # as upstream's loader does: each held-out function leaves the initial list and comes back at its turn
        for turn, names in entry.get("missed_function", {}).items():
            held_out[turn] = []
            for name in names:
                for index, doc in enumerate(docs):
                    if doc["name"] == name:
                        held_out[turn].append(docs.pop(index))
                        break
        ground_truth = answers[entry["id"]]
        tasks.append(
            {
                "id": entry["id"],
                "turns": entry["question"],
                "involved_classes": entry["involved_classes"],
                "initial_config": entry.get("initial_config", {}),
                "missed_function": entry.get("missed_function", {}),
                "path": entry.get("path", []),
                "tools": _tools(docs),
                "held_out_tools": {turn: _tools(turn_docs) for turn, turn_docs in held_out.items()},
                "gold": _gold(entry, ground_truth, category),
            }
        )
    return {
        "category": category,
        "tasks": tasks,
        "unlock_message": DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC,
        "max_steps_per_turn": MAXIMUM_STEP_LIMIT,
    }


# ---- workspaces ----


def _public_methods(instances: dict[str, Any]) -> set[str]:
    # the same set upstream maps to instances before it evaluates a call string
    return {
        name
        for instance in instances.values()
        for name, _ in inspect.getmembers(instance, predicate=inspect.ismethod)
        if not name.startswith("_")
    }


def _safe_unknown_name(name: str) -> bool:
    """A name upstream's `eval` resolves to nothing, so the call can only fail with NameError."""
    return not hasattr(builtins, name) and name not in vars(multi_turn_utils)


def _checked_arguments(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    if not isinstance(arguments, dict):
        raise RefusedCall("arguments must be a JSON object")
    for key in arguments:
        if not isinstance(key, str) or not key.isidentifier() or keyword.iskeyword(key):
            raise RefusedCall(f"argument name {str(key)[:80]!r} is not an identifier")
    return arguments


def check_call(name: Any, arguments: Any, methods: set[str]) -> dict[str, Any]:
    """Validate one call before any string is built from it; the checked arguments."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise RefusedCall(f"function name {str(name)[:80]!r} is not an identifier")
    if name not in methods and not _safe_unknown_name(name):
        raise RefusedCall(f"function {name!r} is not available")
    return _checked_arguments(arguments)


def _workspace(args: dict[str, Any]) -> dict[str, Any]:
    workspace = _workspaces.get(args["workspace"])
    if workspace is None:
        raise KeyError(f"no workspace {args['workspace']!r}")
    return workspace


def op_create(args: dict[str, Any]) -> dict[str, Any]:
    key = args["workspace"]
    if key in _workspaces:
        _drop_globals(_workspaces.pop(key)["model_name"])
    workspace = {
        "model_name": _fresh_model_name("ws"),
        "initial_config": args.get("initial_config") or {},
        "involved_classes": list(args["involved_classes"]),
        "test_entry_id": args["test_entry_id"],
        "long_context": bool(args.get("long_context", False)),
    }
    _, instances = _execute([], workspace)
    _workspaces[key] = workspace
    return {"state": dump_instances(instances)}


def op_call(args: dict[str, Any]) -> dict[str, Any]:
    workspace = _workspace(args)
    _, instances = _execute([], workspace)
    try:
        arguments = check_call(args["name"], args.get("arguments", {}), _public_methods(instances))
    except (RefusedCall, json.JSONDecodeError) as error:
        return {"result": f"{_ERROR_PREFIX}{error}", "refused": True, "state": dump_instances(instances)}
    (call_string,) = convert_to_function_call({args["name"]: arguments})
    results, instances = _execute([call_string], workspace)
    return {"result": results[0], "refused": False, "state": dump_instances(instances)}


def op_state(args: dict[str, Any]) -> dict[str, Any]:
    _, instances = _execute([], _workspace(args))
    return {"state": dump_instances(instances)}


def op_delete(args: dict[str, Any]) -> dict[str, Any]:
    workspace = _workspaces.pop(args["workspace"], None)
    if workspace is not None:
        _drop_globals(workspace["model_name"])
    return {"deleted": workspace is not None}


# ---- grading (parity) ----


def _decode_turns(model_result: list[list[Any]], methods: set[str]) -> list[list[list[str]]]:
    """Each step decoded as eval_runner decodes it (undecodable or empty steps dropped), after refusing any
    step whose names would be code."""
    decoded_turns = []
    for turn in model_result:
        decoded_turn = []
        for step in turn:
            try:
                decoded = convert_to_function_call(step)
            except Exception:  # upstream drops any step it cannot decode
                continue
            if multi_turn_utils.is_empty_execute_response(decoded):
                continue
            for call in [step] if isinstance(step, dict) else step:
                for name, arguments in call.items():
                    check_call(name, arguments, methods)
            decoded_turn.append(decoded)
        decoded_turns.append(decoded_turn)
    return decoded_turns


@functools.lru_cache(maxsize=len(CATEGORIES))
def _category_data(category: str) -> tuple[dict[str, dict[str, Any]], dict[str, list[list[str]]]]:
    entries = {entry["id"]: entry for entry in _read_json_lines(PROMPT_PATH / f"{VERSION_PREFIX}_{category}.json")}
    answers = _read_json_lines(POSSIBLE_ANSWER_PATH / f"{VERSION_PREFIX}_{category}.json")
    return entries, {row["id"]: row["ground_truth"] for row in answers}


def op_grade(args: dict[str, Any]) -> dict[str, Any]:
    """Upstream's verdict, on upstream's own entry and ground truth (read from the package by id)."""
    test_entry_id = args["test_entry_id"]
    category = str(test_entry_id).rsplit("_", 1)[0]
    if category not in CATEGORIES:
        raise ValueError(f"{str(test_entry_id)[:80]!r} is not a BFCL multi-turn entry id")
    entries, answers = _category_data(category)
    entry = copy.deepcopy(entries[test_entry_id])
    ground_truth = answers[test_entry_id]
    model_result = args["model_result"]
    # eval_runner's checks before the checker: a result that is not a list, and force termination
    if not isinstance(model_result, list):
        return {"valid": False, "error_type": "multi_turn:inference_error", "error_message": "not a list"}
    if len(model_result) != len(ground_truth):
        return {
            "valid": False,
            "error_type": "multi_turn:force_terminated",
            "error_message": f"{len(model_result)} model turns for {len(ground_truth)} ground-truth turns",
        }
    model_name = _fresh_model_name("grade")
    probe = {
        "model_name": model_name + "_probe",
        "initial_config": entry.get("initial_config", {}),
        "involved_classes": entry["involved_classes"],
        "test_entry_id": entry["id"],
        "long_context": _long_context(category),
    }
    try:
        _, instances = _execute([], probe)
        try:
            decoded = _decode_turns(model_result, _public_methods(instances))
        except (RefusedCall, json.JSONDecodeError) as error:
            return {"valid": None, "error_type": "refused", "error_message": str(error)}
        verdict = multi_turn_checker(decoded, ground_truth, entry, category, model_name)
    finally:
        for name in (model_name, model_name + "_ground_truth", probe["model_name"]):
            _drop_globals(name)
            _drop_globals(name + "_eval")
    return {
        "valid": bool(verdict["valid"]),
        "error_type": verdict.get("error_type"),
        "error_message": verdict.get("error_message"),
    }


_OPS = {
    "tasks": lambda args: op_tasks(args["category"]),
    "create": op_create,
    "call": op_call,
    "state": op_state,
    "delete": op_delete,
    "grade": op_grade,
    "ping": lambda args: {"version": _package_version()},
}


def _package_version() -> str:
    from importlib.metadata import version

    return version("bfcl-eval")


def _answer(line: str) -> dict[str, Any]:
    request_id = None
    try:
        request = json.loads(line)
        request_id = request.get("id")
        op = _OPS.get(request.get("op"))
        if op is None:
            return {"id": request_id, "ok": False, "error": f"unknown op {str(request.get('op'))[:80]!r}"}
        return {"id": request_id, "ok": True, "result": op(request)}
    except Exception as error:  # every failure is an answer, never a dead worker
        return {"id": request_id, "ok": False, "error": f"{type(error).__name__}: {error}"}


def main() -> None:
    # backends print progress to stdout: keep the protocol's channel for answers only
    protocol = sys.stdout
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if line.strip():
            protocol.write(json.dumps(_answer(line)) + "\n")
            protocol.flush()


if __name__ == "__main__":
    main()
