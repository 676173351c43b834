"""How evidence is shown to people: the HTML pages of ``af-otel report`` and ``af-otel serve``."""
