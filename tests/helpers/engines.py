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
