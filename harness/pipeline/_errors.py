"""The pipeline's one error type."""

from __future__ import annotations

from harness.runfolder import RunFolderError


class PipelineError(RunFolderError):
    """A problem a user can fix (bad path, no raw data, no Java); the message is one clear sentence.

    A :class:`~harness.runfolder.RunFolderError` met while summarising is raised again as this type."""
