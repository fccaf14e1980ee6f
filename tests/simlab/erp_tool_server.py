"""A small ERP tool server of our own, for the SimLab cookbook's vendor bundle (`erp-env`): spec 001's protocol
(GET /tools, POST /step), over fixed data that agrees with the bundle's seed mails (suppliers, orders, invoices,
purchase orders). Its tools are the ones the bundle's verifiers count (`search_invoices`, `get_order`) and the
lookups the tasks ask for. It keeps no state per rollout: the engine uses it as it is and diffs nothing on it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

SUPPLIERS = {
    "SUP-001": {
        "name": "NovaTech Components",
        "categories": ["servers", "edge compute"],
        "contact": "ops@novatech.example",
    },
    "SUP-002": {"name": "GlobalParts Direct", "categories": ["storage"], "contact": "ar@globalparts.example"},
    "SUP-003": {
        "name": "Meridian Supplies",
        "categories": ["monitors", "peripherals"],
        "contact": "qa@meridian.example",
    },
    "SUP-004": {"name": "Apex Security", "categories": ["software licenses"], "contact": "sales@apex.example"},
}
ORDERS = {
    "ORD-3101": {
        "customer": "Pinnacle Corp",
        "supplier": "SUP-003",
        "product": "UltraView 27 monitor (MON-27U)",
        "total": "$6,480.00",
        "status": "confirmed",
    },
    "ORD-3106": {
        "customer": "Cascade Analytics",
        "supplier": "SUP-002",
        "product": "NetVault NAS (NAS-NV4)",
        "total": "$2,150.00",
        "status": "delivered",
    },
}
INVOICES = {
    "INV-5002": {"order": "ORD-3101", "amount": "$6,480.00", "status": "overdue", "due": "2025-01-15"},
    "INV-5006": {"order": "ORD-3106", "amount": "$2,150.00", "status": "overdue", "due": "2025-02-01"},
    "INV-5007": {"order": "ORD-3107", "amount": "$900.00", "status": "paid", "due": "2025-02-20"},
}
PURCHASE_ORDERS = {
    "PO-7002": {"supplier": "SUP-003", "items": "MON-27U x 40, CBL-HDMI x 40", "status": "submitted"},
    "PO-7004": {"supplier": "SUP-001", "items": "PowerEdge E450 x 6", "status": "submitted"},
    "PO-7005": {"supplier": "SUP-004", "items": "SecureGuard licenses x 50", "status": "draft"},
}


def _param(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _tool(name: str, description: str, properties: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": properties or {}, "required": []},
    }


TOOLS = [
    _tool("list_suppliers", "Every supplier: id, name, categories."),
    _tool("get_supplier", "One supplier by id (SUP-xxx) or name.", {"supplier": _param("id or name")}),
    _tool(
        "search_invoices", "Invoices, optionally of one status (paid, unpaid, overdue).", {"status": _param("status")}
    ),
    _tool("get_order", "One order by id (ORD-xxxx).", {"order_id": _param("order id")}),
    _tool("list_purchase_orders", "Purchase orders, optionally of one status.", {"status": _param("status")}),
]


def _supplier(supplier: str = "") -> Any:
    for sid, row in SUPPLIERS.items():
        if supplier in (sid, row["name"]):
            return {"supplier_id": sid, **row}
    return None


def _by_status(rows: dict[str, dict[str, Any]], status: str = "") -> list[dict[str, Any]]:
    return [{"id": key, **row} for key, row in rows.items() if not status or row["status"] == status]


HANDLERS: dict[str, Callable[..., Any]] = {
    "list_suppliers": lambda: [{"supplier_id": sid, **row} for sid, row in SUPPLIERS.items()],
    "get_supplier": _supplier,
    "search_invoices": lambda status="": _by_status(INVOICES, status),
    "get_order": lambda order_id="": {"order_id": order_id, **ORDERS[order_id]} if order_id in ORDERS else None,
    "list_purchase_orders": lambda status="": _by_status(PURCHASE_ORDERS, status),
}


def build_app() -> FastAPI:
    app = FastAPI()

    @app.get("/tools")
    def tools() -> dict[str, Any]:
        return {"tools": TOOLS}

    @app.post("/step")
    def step(body: dict[str, Any]) -> dict[str, Any]:
        action = body.get("action") or {}
        handler = HANDLERS.get(str(action.get("tool_name")))
        if handler is None:
            return {"observation": f"unknown tool {action.get('tool_name')!r}", "is_error": True}
        try:
            found = handler(**(action.get("parameters") or {}))
        except TypeError as exc:
            return {"observation": f"bad parameters: {exc}", "is_error": True}
        if found is None:
            return {"observation": "not found", "is_error": True}
        return {"observation": json.dumps(found)}

    return app
