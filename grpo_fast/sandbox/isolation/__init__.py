"""isolation"""
