"""synth_core: differentially private synthetic tables from a public schema.

Data flows one way: schema -> encoding -> engine -> run -> sampler -> evaluation.
"""
__version__ = "0.1.0"
