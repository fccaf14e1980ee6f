"""Toolsets a user brings to `simlab tasks-gen run --tools`, as they would write them: none is one of ours.

- `ticketing`: a helpdesk whose every tool shares its name with one of the built-in records server's tools
  but not its schema (`create_ticket` has no `description` but a `subject` and a `customer_email`;
  `update_ticket` requires a `status` of other values);
- `catalog`: read-only (a product catalog: nothing in it changes state);
- `billing_openai`: OpenAI function-calling items (`{"type": "function", "function": {...}}`);
- `crm`: a mutating CRM toolset whose names collide with nothing built in.
"""

from __future__ import annotations

from typing import Any


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": _schema(properties, required)}


TICKET_PRIORITIES = ["low", "normal", "high"]
TICKET_STATUSES = ["new", "pending", "solved"]


def ticketing() -> list[dict[str, Any]]:
    ticket_id = {"type": "string", "description": "The ticket's id."}
    return [
        _tool(
            "create_ticket",
            "Open a support ticket for a customer.",
            {
                "subject": {"type": "string", "description": "One-line summary."},
                "customer_email": {"type": "string", "format": "email", "description": "Who asked."},
                "priority": {"type": "string", "enum": TICKET_PRIORITIES},
            },
            ["subject", "customer_email", "priority"],
        ),
        _tool("get_ticket", "Read one ticket.", {"ticket_id": ticket_id}, ["ticket_id"]),
        _tool(
            "list_tickets",
            "List tickets, optionally of one status.",
            {"status": {"type": "string", "enum": TICKET_STATUSES}},
            [],
        ),
        _tool(
            "update_ticket",
            "Move a ticket to another status.",
            {"ticket_id": ticket_id, "status": {"type": "string", "enum": TICKET_STATUSES}},
            ["ticket_id", "status"],
        ),
    ]


def catalog() -> list[dict[str, Any]]:
    return [
        _tool(
            "get_product",
            "Read one product by its id.",
            {"product_id": {"type": "string", "description": "The product's id."}},
            ["product_id"],
        ),
        _tool(
            "search_products",
            "Search the catalog by words of the name, optionally in one category or under a price.",
            {
                "query": {"type": "string", "description": "Words of the product name."},
                "category": {"type": "string", "description": "Only products of this category."},
                "max_price": {"type": "number", "description": "Only products costing at most this."},
            },
            ["query"],
        ),
        _tool("list_categories", "Every product category.", {}, []),
    ]


def billing_openai() -> list[dict[str, Any]]:
    def function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": _schema(properties, required)},
        }

    invoice_id = {"type": "string", "description": "The invoice's id."}
    return [
        function(
            "create_invoice",
            "Issue an invoice to a customer.",
            {
                "customer_name": {"type": "string"},
                "amount": {"type": "number", "minimum": 1},
                "currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
            },
            ["customer_name", "amount", "currency"],
        ),
        function("get_invoice", "Read one invoice.", {"invoice_id": invoice_id}, ["invoice_id"]),
        function("list_invoices", "List every invoice.", {}, []),
        function("void_invoice", "Void an invoice issued by mistake.", {"invoice_id": invoice_id}, ["invoice_id"]),
    ]


def crm() -> list[dict[str, Any]]:
    contact_id = {"type": "string", "description": "The contact's id."}
    return [
        _tool(
            "add_contact",
            "Add a person to the CRM.",
            {
                "full_name": {"type": "string"},
                "email": {"type": "string", "format": "email"},
                "company": {"type": "string"},
                "stage": {"type": "string", "enum": ["lead", "prospect", "customer"]},
            },
            ["full_name", "email", "stage"],
        ),
        _tool("find_contacts", "Search contacts by name.", {"query": {"type": "string"}}, ["query"]),
        _tool(
            "update_contact",
            "Change a contact's company or stage.",
            {
                "contact_id": contact_id,
                "company": {"type": "string"},
                "stage": {"type": "string", "enum": ["lead", "prospect", "customer"]},
            },
            ["contact_id"],
        ),
        _tool(
            "log_call",
            "Record a call with a contact.",
            {"contact_id": contact_id, "notes": {"type": "string"}, "minutes": {"type": "integer", "minimum": 1}},
            ["contact_id", "notes"],
        ),
    ]


USER_TOOLSETS = {"ticketing": ticketing, "catalog": catalog, "billing_openai": billing_openai, "crm": crm}
