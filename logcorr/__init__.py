"""logcorr: align and attribute the logs of a multi-process SGLang deployment."""

__version__ = "0.1.0"
