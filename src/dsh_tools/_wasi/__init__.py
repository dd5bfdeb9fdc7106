"""The WASI sandbox runtime: the module and its cache, the host of one run, the guest.

Importing this package imports no sandbox: ``wasmtime`` is imported when a
``WasiCodeRuntime`` is constructed.
"""
