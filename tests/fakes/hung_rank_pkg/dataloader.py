"""A data loader whose next batch never comes: a rank hung outside any collective."""
import time


class DataLoaderIter:
    def __init__(self, on_blocked):
        self._on_blocked = on_blocked

    def __next__(self):
        return self._next_data()  # CALL: __next__

    def _next_data(self):
        self._on_blocked()
        while True:
            time.sleep(3600.0)  # BLOCKED: _next_data
