"""lapis.figures"""
