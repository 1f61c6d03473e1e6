"""tessera.icd"""
