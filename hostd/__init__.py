"""tessera.hostd"""
