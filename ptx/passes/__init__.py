"""Small named passes over PTX syntax trees, run before code generation."""
