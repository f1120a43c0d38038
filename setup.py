from setuptools import setup

setup(cffi_modules=["jetstream_sync/_build_ffi.py:ffibuilder"])
