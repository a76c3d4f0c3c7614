"""The operations tests that run the app in process and no Label Studio get the same stand-in
for Label Studio's answers about projects and tasks as the backend's unit tests
(tests/backend/conftest.py); those that run a real Label Studio or server process do not use
it."""

from tests.backend.conftest import label_studio_projects  # noqa: F401
