"""Engines for tests beyond sveb/engines/scripted.py's own."""

from sveb.engines.scripted import ScriptedEngine


class Recording(ScriptedEngine):
    """The scripted engine, keeping every request of each kind of generate call."""

    def __init__(self):
        super().__init__()
        self.requests: dict[str, list] = {}

    def generate(self, requests, params, desc=""):
        self.requests.setdefault(desc, []).extend(requests)
        return super().generate(requests, params, desc)


class StopsAfter(ScriptedEngine):
    """The scripted engine, cut off (a session's end) after `n` generate calls."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def generate(self, requests, params, desc=""):
        if len(self.calls) >= self.n:
            raise KeyboardInterrupt("the session ends")
        return super().generate(requests, params, desc)
