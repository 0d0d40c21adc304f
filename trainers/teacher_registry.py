"""The teachers' registry's earlier path, kept for plug-ins written against it: this module is
:mod:`trainers.teachers.registry` itself (one registry, whichever path imports it)."""

import sys
import warnings

from trainers.teachers import registry

warnings.warn(
    "trainers.teacher_registry is now trainers.teachers.registry (or: from trainers.teachers import register_teacher)",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = registry
