"""tessera.vkapi"""
