"""Measuring: pure functions from request outputs to numbers (metrics, goodput, the crossover, step
times), and from numbers to verdicts (the judge, limits and expectations).
"""
