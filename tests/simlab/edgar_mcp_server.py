"""A small SEC EDGAR MCP server of our own (stdio), standing in for the `edgar-mcp` server the SimLab cookbook's
email agent names in its mcp-servers.json: `get_company_info` (what the bundle's verifiers look for) and
`get_company_facts`, over fixed data. Run as a script; it imports only the MCP SDK, so it needs neither the
project nor a PYTHONPATH in the child's minimal environment.
"""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

COMPANIES = {
    "AAPL": {"name": "Apple Inc.", "cik": "0000320193", "fiscal_year_revenue": "$391.0B (FY2024)"},
    "MSFT": {"name": "Microsoft Corporation", "cik": "0000789019", "fiscal_year_revenue": "$245.1B (FY2024)"},
    "ADBE": {"name": "Adobe Inc.", "cik": "0000796343", "fiscal_year_revenue": "$21.5B (FY2024)"},
}


def _company(identifier: str) -> dict[str, str]:
    key = identifier.strip().upper()
    for ticker, row in COMPANIES.items():
        if key in (ticker, row["name"].upper()) or key in row["name"].upper().split():
            return {"ticker": ticker, **row}
    raise ToolError(f"no company matches {identifier!r}")


def build_server() -> MCPServer:
    server = MCPServer("edgar-mcp", log_level="WARNING")

    @server.tool(description="A public company's name, ticker and CIK, by ticker or name.")
    def get_company_info(identifier: str) -> str:
        return json.dumps(_company(identifier))

    @server.tool(description="A public company's latest annual revenue, by ticker or name.")
    def get_company_facts(identifier: str) -> str:
        company = _company(identifier)
        return json.dumps({"ticker": company["ticker"], "revenue": company["fiscal_year_revenue"]})

    return server


if __name__ == "__main__":
    build_server().run("stdio")
