# examples/daisy/alias/daisy/__init__.py: with examples/daisy/alias first on PYTHONPATH,
# `import daisy` (and daisy.v2, daisy.v1_compat, daisy.logging) is blockwise.daisy, so daisy
# scripts run on blockwise without editing them (docs/guide/daisy.md).
import sys

import blockwise.daisy
import blockwise.daisy.v2

sys.modules[__name__] = blockwise.daisy
for name in ("v1_compat", "v2", "logging"):
    sys.modules[__name__ + "." + name] = sys.modules["blockwise.daisy." + name]
