"""The read path: exported spans (files, Tempo, Jaeger, the SDK) become span records, then runs and views.

``records`` holds the OTel-free span values every later step works on; ``sources`` turns each
export format into those values and is the only part of the reader that does I/O.
"""

from __future__ import annotations
