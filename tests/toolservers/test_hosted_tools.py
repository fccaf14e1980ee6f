"""A workspace's tool listing in the hosted product's shape, which SimLab's environment reads."""

from __future__ import annotations

import httpx

from eval_pipelines.toolservers import EmailServer


def test_hosted_tools_carry_each_schema_as_input_schema_and_parameters(email_url: str, client: httpx.Client) -> None:
    workspace = client.post(f"{email_url}/workspaces", json={"seed": []}).json()["path"]
    listed = client.get(f"{email_url}{workspace}/hosted/tools").json()["tools"]
    expected = {tool.name: tool.parameters for tool in EmailServer().tools()}
    assert {tool["name"] for tool in listed} == set(expected)
    for tool in listed:
        assert tool["input_schema"] == tool["parameters"] == expected[tool["name"]]
    send = next(tool for tool in listed if tool["name"] == "send_email")
    assert set(send["input_schema"]["properties"]) == {"to", "subject", "body", "cc"}
    # The spec-001 listing stays as it was.
    plain = client.get(f"{email_url}{workspace}/tools").json()["tools"]
    assert all("input_schema" not in tool for tool in plain)
