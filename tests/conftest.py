"""Suite-wide settings.

Hypothesis runs derandomized by default so a CI run is reproducible (a property
that fails once fails every time, with the same example). Set
``HETVM_HYPOTHESIS=explore`` to draw fresh examples instead, as a long search does.
"""

import os

from hypothesis import settings

settings.register_profile("hetvm-ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("hetvm-explore", deadline=None, print_blob=True)
settings.load_profile(
    "hetvm-explore" if os.environ.get("HETVM_HYPOTHESIS") == "explore" else "hetvm-ci"
)
