"""Naming rules of spec 001 and scoped secret resolution, as tables."""

from __future__ import annotations

import pytest

from eval_pipelines.environments.mcp import McpServerSpec, child_environment
from eval_pipelines.environments.naming import (
    builtin_server_names,
    builtin_tool_names,
    check_tool_name_collisions,
    normalise_name,
    resolve_secret,
    scoped_secret_variable,
    validate_custom_tool_names,
    validate_mcp_server_name,
    validate_mcp_server_names,
)


@pytest.mark.parametrize(
    ("name", "normalised"),
    [
        ("github", "GITHUB"),
        ("my-server", "MY_SERVER"),
        ("my_server", "MY_SERVER"),
        ("a--_-b", "A_B"),
        ("v2-API", "V2_API"),
        ("-x-", "_X_"),
    ],
)
def test_normalisation(name: str, normalised: str) -> None:
    assert normalise_name(name) == normalised


@pytest.mark.parametrize("name", ["github", "my-server", "MY_SERVER_2", "a", "0", "-", "_"])
def test_valid_server_names(name: str) -> None:
    assert validate_mcp_server_name(name) == name


@pytest.mark.parametrize("name", ["", "my server", "my.server", "srv/1", "ünïcode", "a:b", "x\n", "\nx"])
def test_invalid_server_names_are_named_in_the_error(name: str) -> None:
    with pytest.raises(ValueError, match="MCP server name") as caught:
        validate_mcp_server_name(name)
    assert repr(name) in str(caught.value)


@pytest.mark.parametrize(
    ("names", "kwargs", "message"),
    [
        (["my-srv", "MY_SRV"], {}, "'my-srv' and 'MY_SRV' are the same after normalisation"),
        (["dup", "dup"], {}, "'dup' is used more than once"),
        (["email"], {"builtin_server_names": ["email"]}, "'email' collides with a built-in tool server name"),
        (["EMAIL"], {"builtin_server_names": ["email"]}, "'EMAIL' collides with a built-in tool server name"),
        (["lookup"], {"custom_tool_names": ["lookup"]}, "'lookup' collides with a custom tool name"),
        (["crm"], {"other_server_names": ["crm"]}, "'crm' collides with another tool server of this environment"),
        (["ok", "bad name"], {}, "'bad name' is invalid"),
    ],
)
def test_server_name_collisions(names: list[str], kwargs: dict[str, list[str]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_mcp_server_names(names, **kwargs)


def test_distinct_server_names_pass() -> None:
    names = ["github", "git-hub2", "jira"]
    assert validate_mcp_server_names(names, builtin_server_names=["email"], custom_tool_names=["lookup"]) == names


def test_builtin_names_come_from_the_registry() -> None:
    assert "email" in builtin_server_names()
    assert {"send_email", "search_emails"} <= builtin_tool_names()


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["lookup", "send_email"], "'send_email' shadows a built-in tool"),
        (["lookup", "lookup"], "'lookup' is defined more than once"),
        (["  "], "must be a non-empty string"),
    ],
)
def test_custom_tool_names(names: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_custom_tool_names(names, builtin_tool_names=builtin_tool_names())


def test_unique_custom_tools_pass() -> None:
    assert validate_custom_tool_names(["lookup", "summarise"], builtin_tool_names={"send_email"}) == [
        "lookup",
        "summarise",
    ]


def test_tool_name_collision_between_transports() -> None:
    check_tool_name_collisions({"email": ["send_email"]}, {"github": ["open_issue"], "jira": ["open_issue"]})
    with pytest.raises(ValueError, match="'send_email' is served both by HTTP tool server 'email' and by MCP server"):
        check_tool_name_collisions({"email": ["send_email"]}, {"mailer": ["send_email"]})


def test_scoped_secret_variable_name() -> None:
    assert scoped_secret_variable("my-srv_x", "API_KEY") == "EVAL_MCP_MY_SRV_X__API_KEY"
    assert scoped_secret_variable("gh", "TOKEN", prefix="ACME") == "ACME_MCP_GH__TOKEN"
    with pytest.raises(ValueError, match="secret key 'bad-key'"):
        scoped_secret_variable("gh", "bad-key")
    with pytest.raises(ValueError, match="secret prefix 'MY-CO'"):
        scoped_secret_variable("gh", "TOKEN", prefix="MY-CO")


SCOPED = "EVAL_MCP_GITHUB__TOKEN"


@pytest.mark.parametrize(
    ("env", "declaring", "default", "expected"),
    [
        # scoped wins over everything
        ({SCOPED: "scoped", "TOKEN": "raw"}, {"github"}, "dflt", "scoped"),
        ({SCOPED: "scoped", "TOKEN": "raw"}, {"github", "gitlab"}, None, "scoped"),
        # raw key only when exactly one server declares it
        ({"TOKEN": "raw"}, {"github"}, "dflt", "raw"),
        ({"TOKEN": "raw"}, {"github", "gitlab"}, "dflt", "dflt"),
        ({"TOKEN": "raw"}, {"github", "gitlab"}, None, None),
        # default last
        ({}, {"github"}, "dflt", "dflt"),
        ({}, {"github"}, None, None),
        # a set-but-empty variable counts: it is how a secret is blanked
        ({SCOPED: "", "TOKEN": "raw"}, {"github"}, "dflt", ""),
        # another server's scoped variable is not ours
        ({"EVAL_MCP_GITLAB__TOKEN": "theirs"}, {"github", "gitlab"}, None, None),
    ],
)
def test_resolve_secret_lookup_order(
    env: dict[str, str], declaring: set[str], default: str | None, expected: str | None
) -> None:
    assert resolve_secret("TOKEN", "github", declaring, env, default=default) == expected


def test_resolve_secret_prefix_and_normalised_server() -> None:
    env = {"ACME_MCP_MY_GIT_HUB__TOKEN": "v", "EVAL_MCP_MY_GIT_HUB__TOKEN": "wrong-prefix"}
    assert resolve_secret("TOKEN", "my-git-hub", {"my-git-hub"}, env, prefix="ACME") == "v"


def test_resolve_secret_requires_the_server_to_declare_the_key() -> None:
    with pytest.raises(ValueError, match="'github' does not declare secret 'TOKEN'"):
        resolve_secret("TOKEN", "github", {"gitlab"}, {})


def test_child_environment_scopes_shared_keys() -> None:
    github = McpServerSpec(name="github", command="gh-mcp", secrets={"TOKEN": None, "ONLY_GH": None})
    gitlab = McpServerSpec(name="git-lab", command="gl-mcp", secrets={"TOKEN": "gl-default"}, env={"MODE": "ro"})
    declaring = {"TOKEN": {"github", "git-lab"}, "ONLY_GH": {"github"}}
    environ = {"TOKEN": "shared-raw", "ONLY_GH": "gh-raw", "EVAL_MCP_GITHUB__TOKEN": "gh-scoped", "CANARY": "x"}
    assert child_environment(github, declaring, environ) == {"TOKEN": "gh-scoped", "ONLY_GH": "gh-raw"}
    # The shared raw TOKEN is not handed to git-lab: its default applies.
    assert child_environment(gitlab, declaring, environ) == {"MODE": "ro", "TOKEN": "gl-default"}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "bad name", "url": "http://x/mcp"}, "MCP server name 'bad name' is invalid"),
        ({"name": "s"}, "exactly one of 'url'"),
        ({"name": "s", "url": "http://x/mcp", "command": "c"}, "exactly one of 'url'"),
        ({"name": "s", "url": "ftp://x"}, "url must start with http"),
        ({"name": "s", "url": "http://x/mcp", "secrets": {"K": None}}, "command servers only"),
        ({"name": "s", "command": ""}, "command must not be empty"),
        ({"name": "s", "command": "c", "secrets": {"not-a-var": None}}, "secret key 'not-a-var'"),
        ({"name": "s", "command": "c", "env": {"1X": "v"}}, "env variable '1X'"),
        ({"name": "s", "command": "c", "env": {"K": "v"}, "secrets": {"K": None}}, r"\['K'\] given both"),
    ],
)
def test_spec_validation(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        McpServerSpec.model_validate(fields)


def test_spec_repr_hides_env_and_secrets() -> None:
    spec = McpServerSpec(name="s", command="c", env={"K": "env-value-123"}, secrets={"T": "secret-default-456"})
    assert "env-value-123" not in repr(spec) and "secret-default-456" not in repr(spec)
    assert "env-value-123" not in str(spec) and "secret-default-456" not in str(spec)
