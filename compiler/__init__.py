"""tessera.compiler"""
