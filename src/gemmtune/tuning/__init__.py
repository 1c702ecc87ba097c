"""The tuner in parts, each readable and testable alone (``gemmtune.tune`` wraps them):

- ``options.py``: ``TuneOptions``, every setting of a run, frozen and validated;
- ``plan.py``: what is benchmarked per problem (candidates, the model's top-k), pure;
- ``executor.py``: the benchmark worker pool and the compile workers that run ahead of it;
- ``recorder.py``: the results store side: what is pending, claims, recording, summaries;
- ``progress.py``: the progress bar / plain progress lines;
- ``results.py``: ``ShapeResult``, ``TuneResult`` and how they are printed;
- ``runoff.py``: when a close winner is timed again beside cuBLAS, and who wins then, pure;
- ``tuner.py``: ``Tuner``, which runs a plan through the executor into the recorder.
"""
