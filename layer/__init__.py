"""tessera.layer"""
