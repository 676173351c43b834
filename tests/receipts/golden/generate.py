"""Write the af-2 golden vectors (``af-2.json``, docs/receipt-spec.md §12.7) from the independent
reference minter (tests/receipts/reference.py: hashlib, hmac, rfc8785), never from af_otel's
hashing code. Run once, from the repository root: ``.venv/bin/python tests/receipts/golden/generate.py``.
The committed file is never regenerated in place over an old one: a new encoding is a new scheme.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import rfc8785  # noqa: E402

from af_otel import Request  # noqa: E402  (normalization only: the request's plain form)
from tests.receipts.reference import expected_attributes, h, key_ident, plain  # noqa: E402

RUN, LANE = "run-spec", "5f0c8e2a9b3d4f61"
SPAN = {
    "af.gaps": ["cache-transform"],
    "af.receipt.scope.name": "opentelemetry.instrumentation.openai_v2",
    "af.receipt.scope.version": "2.1b0",
}
HASHES = [
    ("run-1", "hello", None),
    ("run-1", "af.messages.v1", None),
    ("run-1", "hello", "key"),
    ("run-a", "You are a helpful assistant.", None),
    ("run-1", "", "k"),
]


def golden() -> dict[str, Any]:
    spec = (ROOT / "docs" / "receipt-spec.md").read_text("utf-8")
    found = re.search(r"```json\n(.*?)\n```", spec[spec.index("### 9.3") :], re.DOTALL)
    assert found is not None
    request = json.loads(found.group(1))
    whole = plain(Request.from_dict(request).to_dict())
    first = plain(Request.from_dict({**request, "messages": request["messages"][:1]}).to_dict())
    span = {**SPAN, "af.epoch.lane": LANE}
    cases = []
    for key in (None, b"spec-key"):
        parent = expected_attributes(
            first, run_id=RUN, epoch=1, parent=0, key=key, scheme="af-2", span=span
        )
        entries = [h(RUN, rfc8785.dumps(m), key, 64) for m in first["messages"]]
        child = expected_attributes(
            whole,
            run_id=RUN,
            epoch=2,
            parent=1,
            parent_entries=entries,
            key=key,
            scheme="af-2",
            span={**span, "af.receipt.parent_digest": parent["af.receipt.digest"]},
        )
        cases.append({"key": key.decode() if key else None, "parent": parent, "receipt": child})
    return {
        "about": "af-2 receipts of docs/receipt-spec.md section 12.7, computed by "
        "tests/receipts/reference.py (hashlib, hmac, rfc8785), never by af_otel's hashing code",
        "run_id": RUN,
        "lane": LANE,
        "request": request,
        "span": SPAN,
        "hashes": [
            {"salt": s, "text": t, "key": k, "h2": h(s, t.encode(), k.encode() if k else None, 64)}
            for s, t, k in HASHES
        ],
        "key_ids": {"spec-key": key_ident(b"spec-key"), "k": key_ident(b"k")},
        "receipts": cases,
    }


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("af-2.json")
    out.write_text(json.dumps(golden(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
