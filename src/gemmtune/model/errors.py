"""The model package's errors: one for files and data it cannot use, one for a model it
loads but does not trust here (and then ranks with the analytic model instead)."""


class ModelError(ValueError):
    """A model file or a training set that cannot be used; the message says why."""


class ModelWarning(UserWarning):
    """A model that loads but is not trusted here (other GPU / triton / features / a missing library)."""


class ModelDependencyError(ModelError):
    """A model file that needs a library this Python lacks (lightgbm for a ranker)."""
