import os

import torch
from hypothesis import settings

# Deterministic, single-threaded, and quick enough for a 2-core machine.
torch.set_num_threads(int(os.environ.get("COURSE_PE_THREADS", "1")))
settings.register_profile("course", max_examples=60, deadline=None, derandomize=True)
settings.load_profile("course")
