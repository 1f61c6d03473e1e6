"""tessera.tools"""
