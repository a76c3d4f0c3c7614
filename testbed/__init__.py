"""Real servers and projects on 127.0.0.1, shared by the tests, the benchmarks and the scripts.

- :mod:`testbed.servers`: redis-server, Label Studio 1.23.2 and our backend as processes
  (:class:`~testbed.servers.LabelStudioServer`, :class:`~testbed.servers.RedisServer`,
  :class:`~testbed.servers.BackendServer`, :func:`~testbed.servers.free_port`, memory and CPU
  probes of a process tree);
- :mod:`testbed.projects`: Label Studio projects of real CoNLL-2003 and SST-2 data with known
  wrong annotations, and waiting for the backend's training;
- :mod:`testbed.browser`: headless Chromium over its DevTools protocol.

Not part of the installed library: import it from the repository root (``python -m pytest``,
``python -m benchmarks.NAME``, ``python -m scripts.NAME`` put the root on ``sys.path``).
"""
