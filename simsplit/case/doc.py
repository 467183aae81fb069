"""Render the case schema as a Markdown table (the README's schema section is made by this)."""

from __future__ import annotations

import json
from typing import Any, Iterator

from simsplit.case.schema import case_schema


def _type_text(node: dict[str, Any]) -> str:
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    types = node.get("type", "")
    types = types if isinstance(types, list) else [types]
    text = " or ".join(t for t in types if t)
    bounds = [f"{sym} {node[k]}" for k, sym in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                               ("maximum", "<="), ("exclusiveMaximum", "<"))
              if k in node]
    if "items" in node and isinstance(node["items"], dict):
        text += f" of {_type_text(node['items'])}"
    if bounds:
        text += " (" + ", ".join(bounds) + ")"
    return text


def rows(node: dict[str, Any] | None = None,
         prefix: str = "") -> Iterator[tuple[str, str, str, str]]:
    """(dotted key, type, default, description) for every key, depth first."""
    node = node or case_schema()
    for key, sub in node.get("properties", {}).items():
        path = f"{prefix}{key}"
        default = json.dumps(sub["default"]) if "default" in sub else "required" \
            if key in node.get("required", []) else ""
        if sub.get("type") == "object" and "properties" in sub:
            yield path, "section", "", sub.get("description", "")
            yield from rows(sub, path + ".")
        else:
            yield path, _type_text(sub), default, sub.get("description", "")


def markdown() -> str:
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for path, typ, default, desc in rows():
        desc = desc.replace("|", "\\|")
        lines.append(f"| `{path}` | {typ} | {default and f'`{default}`'} | {desc} |")
    return "\n".join(lines)


START, END = "<!-- schema:start -->", "<!-- schema:end -->"


def update_readme(path: str) -> bool:
    """Rewrite the table between the schema markers of ``path``; True when it changed."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    new = f"{head}{START}\n{markdown()}\n{END}{tail}"
    if new != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
    return new != text


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 2 and sys.argv[1] == "--update":
        print("updated" if update_readme(sys.argv[2]) else "up to date")
    else:
        print(markdown())
