"""lapis.pipeline_sim"""
