"""tessera.schemas"""
