"""tessera.spirv"""
