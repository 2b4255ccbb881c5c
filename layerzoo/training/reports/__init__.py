"""What a run reports: the grid and text reports, their heatmap and perplexity plots, loss curves,
and the figure of a comparison."""
