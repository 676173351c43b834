"""The botocore tap in a fresh process (run in the Bedrock side venv by test_bedrock.py): the tap
is installed before botocore is imported, so it must patch botocore when the application imports
it, not import it itself; then one Converse call's body is kept under the current span, and after
``uninstall`` none is.

    python tap_probe.py <port>
"""

from __future__ import annotations

import json
import sys

from af_otel import wire

KEY = (0xABC, 0xDEF)


def main(port: int) -> None:
    wire.install(lambda: KEY)
    imported_by_install = "botocore.client" in sys.modules
    import boto3  # the application's import, after the processor started

    def client() -> object:
        return boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=f"http://127.0.0.1:{port}",
            aws_access_key_id="AKIDFAKE",
            aws_secret_access_key="fake-secret",
        )

    messages = [{"role": "user", "content": [{"text": "hi"}]}]
    client().converse(modelId="m.x-v1:0", messages=messages)  # type: ignore[attr-defined]
    kept = wire.SENT.take(KEY)
    wire.uninstall()
    client().converse(modelId="m.x-v1:0", messages=messages)  # type: ignore[attr-defined]
    after = wire.SENT.take(KEY)
    out = {
        "imported_by_install": imported_by_install,
        "kept": [[s.endpoint, s.host, json.loads(s.body), s.path.decode()] for s in kept],
        "after_uninstall": len(after),
    }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(int(sys.argv[1]))
