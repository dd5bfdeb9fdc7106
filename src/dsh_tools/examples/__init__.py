"""Example tools that ship with dsh-trio (used by the demo and the quickstart)."""

from .file_tools import FileError, FileInfo, PathOutsideWorkspaceError, WriteReceipt, file_tools

__all__ = ["FileError", "FileInfo", "PathOutsideWorkspaceError", "WriteReceipt", "file_tools"]
