"""lapis.model"""
