"""A scripted, LLM-free agent for the SimLab cookbook's tasks (and the custom CLI tools equivalent): it recognises
each task by its instruction, makes the tool calls the task's verifier looks for (the inbox twice, the SEC EDGAR
lookup over MCP, the ERP lookups over HTTP, the workspace files) and answers in the shape the verifier checks,
with figures read from the servers where the answer needs them. Loaded by the engine from
'tests.simlab.cookbook_agent:CookbookAgent'.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from eval_pipelines.agents.base import BaseAgent
from eval_pipelines.environments.base import BaseEnvironment
from eval_pipelines.schemas.artifacts import RunArtifacts
from eval_pipelines.schemas.tools import ToolCall

TODO = "\n".join(
    [
        "- [P1] Send the revised quote before the deadline",
        "- [P1] Send the security package (SSO, SOC 2 bridge letter)",
        "- [P2] Close the legal redlines with counsel",
        "- [P3] Circulate the executive summary",
    ]
)

APPLE = f"""## Todo List
{TODO}

## Sales Call Brief
Account: Apple
Ticker: AAPL
Stage: Renewal, fragile
Key Pains: mobile device management controls and an updated SOC 2 bridge letter
Blockers: audit rights and indemnity language
Next Step: revised quote to Procurement by Friday noon
Public Company Context: {{company}}
"""

MICROSOFT = """## Inbox Triage
- Microsoft renewal at risk: the revised quote is due Wednesday EOD
- Board follow-up: the Q2 hiring plan is due Thursday at 2pm, a board update on the recruiting funnel,
  finance prep before Friday
- Northstar pilot blocked on the admin training plan: customer risk

## Todo List
- [P1] Reply with the Q2 hiring plan by Thursday 2pm
- [P1] Send Microsoft the revised quote by Wednesday EOD
- [P2] Draft the board update on the recruiting funnel
- [P2] Send Northstar the training plan
- [P3] Agenda for the finance prep before Friday's review

## Sales Call Brief
Account: Microsoft
Ticker: MSFT
Stage: Renewal at risk
Key Pains: SSO and an updated SOC 2 packet
Blockers: legal redlines in the MSA
Next Step: revised quote by Wednesday EOD
Public Company Context: {company}
"""

ADOBE = f"""## Todo List
{TODO}

## Meeting Prep Packet
Meeting: Adobe renewal prep call, tomorrow 11am PT
Objective: renewal signed this month
Agenda: deployment wins, premium support bundle, commercial flexibility
Stakeholders: VP of Procurement, Dana Ortiz
Risks: SSO rollout timing, SOC 2 bridge letter, audit rights language
Open Questions: discount exception above 8 percent?
Next Step: send SSO timing and the SOC 2 letter before the call
Public Company Context: {{company}}, annual revenue {{revenue}}
"""

VENDORS = """## Vendor Performance Report
### NovaTech Components
Supplier: NovaTech Components
Supplier ID: {SUP_NovaTech}
Categories: servers
Issue Summary: delivery late, third delay this quarter
Risk Rating: High

### GlobalParts Direct
Supplier: GlobalParts Direct
Supplier ID: {SUP_GlobalParts}
Categories: storage
Issue Summary: overdue payment on our side
Risk Rating: Medium

### Meridian Supplies
Supplier: Meridian Supplies
Supplier ID: {SUP_Meridian}
Categories: peripherals
Issue Summary: 24% failed QA, defective units
Risk Rating: High

## Action Items
- [P1] Escalate the NovaTech delay
- [P1] Return Meridian's defective units
- [P2] Pay GlobalParts' overdue invoices this week
- [P3] Document all three for the quarterly vendor review
"""

AUDIT = """## Findings
1. Order: ORD-3101
   Customer: {ORD-3101.customer}
   Supplier: {ORD-3101.supplier}
   Product: {ORD-3101.product}
   Invoice Status: overdue (INV-5002)
   Finding: the invoice is past due and unpaid.
2. Order: ORD-3106
   Customer: {ORD-3106.customer}
   Supplier: {ORD-3106.supplier}
   Product: {ORD-3106.product}
   Invoice Status: overdue (INV-5006)
   Finding: delivered months ago, still unpaid.

## Financial Summary
Total Overdue Amount: {overdue}
Total At-Risk Revenue: {at_risk}
Suppliers With Open POs: NovaTech Components (PO-7004), Meridian Supplies (PO-7002)

## Remediation Plan
- [P1] Collect INV-5002 from Pinnacle
- [P1] Collect or write off INV-5006
- [P2] Chase PO-7004 with NovaTech
- [P2] Chase PO-7002 with Meridian
- [P3] Confirm the Apex draft PO
"""

SUMMARY = "# Workspace tools\n\nThis workspace offers read_file, write_file, list_dir and run_command.\n"
REPORT = (
    "# Workspace report\n\nQ4 revenue: $12.5M, growth 18%.\nTotal headcount: 120.\n"
    "Engineering: 45\nSales: 30\nOperations: 20\nFinance: 15\nPeople: 10\n\nThe company grew while hiring.\n"
)


def _dollars(amounts: list[str]) -> str:
    total = sum(float(a.strip("$").replace(",", "")) for a in amounts)
    return f"${total:,.2f}"


class CookbookAgent(BaseAgent):
    def __init__(self, **_: Any) -> None:
        self.environment: BaseEnvironment | None = None
        self.context: RunArtifacts | None = None

    @staticmethod
    def name() -> str:
        return "cookbook_scripted"

    async def _call(self, server: str, tool: str, parameters: dict[str, Any]) -> str:
        assert self.environment is not None and self.context is not None
        result = await self.environment.acall_tool(server, tool, parameters)
        call_id = f"call_{uuid.uuid4().hex[:8]}"
        self.context.record_message(
            "assistant", None, tool_calls=[{"id": call_id, "name": tool, "arguments": parameters}]
        )
        self.context.record_tool_call(ToolCall(tool_server=server, tool_name=tool, parameters=parameters), result)
        self.context.record_message("tool", result.observation, tool_call_id=call_id)
        if result.is_error:
            raise RuntimeError(f"{server}.{tool} failed: {result.observation}")
        return result.observation

    async def _inbox(self) -> None:
        await self._call("email", "list_emails", {"folder": "inbox", "limit": 20})
        await self._call("email", "search_emails", {"query": "renewal"})

    async def _company(self, ticker: str) -> dict[str, Any]:
        info: dict[str, Any] = json.loads(await self._call("edgar-mcp", "get_company_info", {"identifier": ticker}))
        facts = json.loads(await self._call("edgar-mcp", "get_company_facts", {"identifier": ticker}))
        return {**info, **facts}

    async def _vendors(self) -> str:
        suppliers = json.loads(await self._call("erp-env", "list_suppliers", {}))
        await self._call("erp-env", "search_invoices", {"status": "overdue"})
        ids = {f"SUP_{row['name'].split()[0]}": row["supplier_id"] for row in suppliers}
        return VENDORS.format(**ids)

    async def _audit(self) -> str:
        fields: dict[str, str] = {}
        for order_id in ("ORD-3101", "ORD-3106"):
            order = json.loads(await self._call("erp-env", "get_order", {"order_id": order_id}))
            supplier = json.loads(await self._call("erp-env", "get_supplier", {"supplier": order["supplier"]}))
            fields[f"{order_id}.customer"] = order["customer"]
            fields[f"{order_id}.supplier"] = f"{supplier['name']} ({supplier['supplier_id']})"
            fields[f"{order_id}.product"] = order["product"]
            fields[f"{order_id}.total"] = order["total"]
        overdue = json.loads(await self._call("erp-env", "search_invoices", {"status": "overdue"}))
        await self._call("erp-env", "list_purchase_orders", {"status": "submitted"})
        text = AUDIT
        for key, value in fields.items():
            text = text.replace("{" + key + "}", value)
        at_risk = _dollars([fields["ORD-3101.total"], fields["ORD-3106.total"]])
        return text.replace("{overdue}", _dollars([row["amount"] for row in overdue])).replace("{at_risk}", at_risk)

    async def _answer(self, instruction: str) -> str:
        if "workspace_summary.md" in instruction:
            await self._call("files", "list_dir", {"path": "."})
            await self._call("files", "write_file", {"path": "workspace_summary.md", "content": SUMMARY})
            return "Wrote workspace_summary.md."
        if "workspace_report.md" in instruction:
            await self._call("files", "write_file", {"path": "workspace_report.md", "content": REPORT})
            return "Wrote workspace_report.md."
        await self._inbox()
        if "procurement auditor" in instruction:
            return await self._audit()
        if "procurement analyst" in instruction:
            return await self._vendors()
        ticker = "AAPL" if "Apple" in instruction else "MSFT" if "Microsoft" in instruction else "ADBE"
        company = await self._company(ticker)
        template = {"AAPL": APPLE, "MSFT": MICROSOFT, "ADBE": ADOBE}[ticker]
        return template.format(company=f"{company['name']} ({company['ticker']})", revenue=company["revenue"])

    async def run(self, instruction: str, environment: BaseEnvironment, context: RunArtifacts) -> None:
        self.environment, self.context = environment, context
        context.record_message("user", instruction)
        answer = await self._answer(instruction)
        context.record_message("assistant", answer)
        context.set_final_observation(answer)
