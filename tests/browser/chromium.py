"""A real browser for the report pages: Debian's chromium, headless, driven through Debian's
chromium-driver by Selenium (the two come from the same source package, so their versions match;
tests/harness/setup.sh installs them). What a test reads back besides the DOM: the console's
messages and every network request the page made (Chrome's performance log)."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# no background traffic of Chromium's own (updates, sync, safe browsing): the network requests a
# test sees are the page's. --no-sandbox: the tests run as root, which Chromium's sandbox refuses.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--hide-scrollbars",
    "--window-size=1400,1000",
)


def missing() -> str:
    """Why the browser tests cannot run here ('' when they can): they fail, never skip, on it."""
    absent = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if absent:
        return f"{', '.join(absent)} missing: run tests/harness/setup.sh (apt: chromium chromium-driver)"
    return ""


@dataclass
class Loaded:
    """A page as the browser loaded it."""

    url: str
    load_s: float  # driver.get(): until the load event
    console: list[dict]  # {"level": "SEVERE", "message": ...}
    requests: list[str]  # every URL the page asked for, itself included


class Browser:
    def __init__(self, driver) -> None:
        self.driver = driver

    def load(self, path: Path) -> Loaded:
        self.driver.get_log("browser")  # what earlier pages said is theirs
        self.driver.get_log("performance")
        url = path.resolve().as_uri()
        started = time.monotonic()
        self.driver.get(url)
        load_s = time.monotonic() - started
        return Loaded(url, load_s, self.driver.get_log("browser"), self._requests())

    def _requests(self) -> list[str]:
        urls = []
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                urls.append(message["params"]["request"]["url"])
        return urls

    def css(self, selector: str) -> list:
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def one(self, selector: str):
        found = self.css(selector)
        assert len(found) == 1, f"{selector!r}: {len(found)} elements"
        return found[0]

    def script(self, source: str, *args):
        return self.driver.execute_script(source, *args)


def page_requests(loaded: Loaded) -> list[str]:
    """The requests the page made that could leave the page: Chromium's own (chrome:// resources of
    a fresh profile's first page) are not the page's, and inline data (data:, Chromium's own blank
    image among them) reaches nothing."""
    return [u for u in loaded.requests if not u.startswith(("chrome://", "data:"))]


def foreign_requests(loaded: Loaded) -> list[str]:
    """What the page fetched beyond itself: inline data (data:) and its own URL are not requests
    to anywhere."""
    return [u for u in page_requests(loaded) if u != loaded.url and not u.startswith("about:")]


def errors(loaded: Loaded) -> list[str]:
    return [m["message"] for m in loaded.console if m.get("level") in ("SEVERE", "ERROR", "WARNING")]


@contextmanager
def chromium(profile: Path) -> Iterator[Browser]:
    """One headless Chromium with a fresh profile, quit at the end whatever happened."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    try:
        yield Browser(driver)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
