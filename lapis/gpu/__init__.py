"""lapis.gpu"""
